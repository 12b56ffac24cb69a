#!/bin/sh
# aider's --test-cmd, run by aider after every edit. aider gives the model another answer only when
# its test command fails, so this always exits 1: the load check's report goes back to the model
# every time, and the model ends by answering without an edit (aider's own cap: 3 such rounds).
shot.sh "${1:-game.html}"
echo
echo "That was the load check of the page after your edit (this report always comes back, it is not"
echo "a failure by itself). Improve the page, or, when it is finished, answer DONE without an edit."
exit 1
