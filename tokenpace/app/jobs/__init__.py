"""Each command's run from config to stored result (bench, bench --repeat, sweep, ab): ids, files, the
store, Ctrl-C; and the progress a caller may watch. The top of the app: nothing in it is imported by
another room."""
