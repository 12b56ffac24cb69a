"""The building blocks of one run: the pipeline, the page watcher, shot.sh's endpoint, the final
choice, the world's title and the run's plain-English summary. The run folder's files and their
reader are in showcase.runfolder."""
