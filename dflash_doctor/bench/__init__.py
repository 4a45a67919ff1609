"""`dflash-doctor bench`: measure acceptance across the drafter's window on the live server."""
