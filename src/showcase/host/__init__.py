"""Tools for the machine itself, shared by every part that needs them: the check's CPU group
(cpu_share), the foreign-process monitor (monitor), the egress watch of a sealed container
(egress), reads of the folders the agent controls (untrusted), the one-final-check-at-a-time lock
(lock) and the Ray cluster's connection (cluster). They import nothing of showcase above errors,
io and paths."""
