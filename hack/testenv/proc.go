package testenv

import (
	"os"
	"strconv"
	"strings"
)

// Alive reports whether pid is a process that has not exited: one in
// /proc and not a zombie, for the tests that check a teardown ended what it
// had to. A process whose state cannot be read for another reason counts as
// alive, so that such a test does not pass by accident.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may contain
	// spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return true
	}
	f := strings.Fields(s[i+1:])
	return len(f) == 0 || f[0] != "Z" && f[0] != "X"
}
