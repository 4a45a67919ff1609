"""Self-contained probe scripts shipped to hosts (stdlib + torch)."""
