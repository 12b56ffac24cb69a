"""`showcase batch`: many runs of several setups, on this machine or across a Ray cluster."""
