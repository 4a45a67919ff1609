"""What the commands do between parsing and printing: host selection, the inputs each command
builds from its options (commands/options.py), and the report it assembles. Nothing here prints
or exits; cli.py does."""
