"""Turn findings into a change to how the server is launched; apply it safely."""
