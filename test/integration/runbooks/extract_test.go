package runbooks_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// command is one command line of a runbook's shell blocks, comments removed, placeholders kept.
type command struct {
	runbook, text string
}

// shellFence opens a fenced shell block, at any indentation (blocks inside numbered lists).
var shellFence = regexp.MustCompile("^```(sh|bash|shell)\\s*$")

// runbookCommands reads every command line of docs/runbooks/*.md, in file order.
func runbookCommands() ([]command, error) {
	paths, err := filepath.Glob(filepath.Join(manifests.RepoRoot(), "docs", "runbooks", "*.md"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no runbooks in docs/runbooks")
	}
	sort.Strings(paths)
	var out []command
	for _, path := range paths {
		lines, err := shellLines(path)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out = append(out, command{runbook: strings.TrimSuffix(filepath.Base(path), ".md"), text: l})
		}
	}
	return out, nil
}

// inlineCommand is a code span of prose that starts with a program the runbooks run.
var inlineCommand = regexp.MustCompile("`((?:oc|bootimagectl) [^`]*)`")

// shellLines returns the command lines of path's shell blocks, comment-only lines dropped,
// trailing comments cut, lines ending in a backslash joined with the next; and the commands
// of its prose's code spans, which may wrap over lines; all in file order.
func shellLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	in, pending, para := false, "", ""
	flush := func() {
		for _, m := range inlineCommand.FindAllStringSubmatch(para, -1) {
			out = append(out, m[1])
		}
		para = ""
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && shellFence.MatchString(line):
			flush()
			in = true
		case !in && line == "":
			flush()
		case !in:
			para += " " + line
		case strings.HasPrefix(line, "```"):
			in = false
		default:
			line = pending + stripComment(line)
			if pending = ""; strings.HasSuffix(line, `\`) {
				pending = strings.TrimSuffix(line, `\`)
			} else if line != "" {
				out = append(out, line)
			}
		}
	}
	flush()
	if in || pending != "" {
		return nil, fmt.Errorf("%s: a shell block or a continued line is not closed", path)
	}
	return out, sc.Err()
}

// stripComment cuts a # that starts a word outside quotes, and what follows it.
func stripComment(line string) string {
	cut := len(line)
	eachUnquoted(line, func(i int) bool {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			cut = i
			return false
		}
		return true
	})
	return strings.TrimSpace(line[:cut])
}

// stages splits a command line into its pipeline's commands at the pipes outside quotes.
func stages(line string) []string {
	var out []string
	start := 0
	eachUnquoted(line, func(i int) bool {
		if line[i] == '|' {
			out = append(out, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
		return true
	})
	return append(out, strings.TrimSpace(line[start:]))
}

// eachUnquoted calls f with the index of each byte of line outside single or double quotes,
// until f returns false.
func eachUnquoted(line string, f func(int) bool) {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case !f(i):
			return
		}
	}
}

// placeholder is an all-capitals word (NAME, MACHINE, N) after a character that is neither a
// letter, a digit nor the dash of a flag (-A).
var placeholder = regexp.MustCompile(`(^|[^-\w])([A-Z][A-Z_]*)\b`)

// substitute replaces each placeholder of line by its value in values, or fails on one it lacks.
func substitute(line string, values map[string]string) (string, error) {
	var unknown []string
	out := placeholder.ReplaceAllStringFunc(line, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		v, ok := values[sub[2]]
		if !ok {
			unknown = append(unknown, sub[2])
		}
		return sub[1] + v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("placeholder %s has no value: add it to the placeholders table", strings.Join(unknown, ", "))
	}
	return out, nil
}
