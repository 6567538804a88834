# Shared by run.sh and validate.sh (sourced): log lines, and steps under a hard
# time limit whose output goes to the terminal and to $LOG. A step that fails or is
# killed is reported and the run goes on.
say() { echo "$@" | tee -a "$LOG"; }
run() {
    local limit=$1
    shift
    say "+ $* (limit ${limit}s)"
    timeout --signal=INT --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || say "step exited with $rc"
    return 0
}
