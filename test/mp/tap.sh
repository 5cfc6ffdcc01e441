# Sourced by the shell tests of test/mp: TAP lines for their checks.
#   check STATUS TEXT   "ok N - TEXT" when STATUS is 0, else "not ok N - TEXT"
#                       and $fail set; the test exits with $fail.
n=0
fail=0
check() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=1
	fi
}
