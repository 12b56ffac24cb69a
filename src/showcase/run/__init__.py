"""The building blocks of one run: the files it leaves, the page watcher, the final choice,
the world's title and the run's plain-English summary."""
