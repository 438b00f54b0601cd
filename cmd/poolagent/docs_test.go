package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
)

// docFiles are the documents whose examples TestDocsCommands checks: the
// README and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// TestDocsCommands checks that every command shown in the README and in
// docs/ exists as written: each `poolagent …` and `poolagent-run …`
// command line in a fenced block or an inline code span names a command
// poolagent has, with flags that command accepts; each `scripts/…` it
// shows exists, is executable and documents every flag given to it.
func TestDocsCommands(t *testing.T) {
	app := newApp()
	checked := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../../")
		for _, ex := range commandExamples(string(text)) {
			checked++
			if problem := checkExample(app, ex.words); problem != "" {
				t.Errorf("%s:%d: %s: %s", name, ex.line, strings.Join(ex.words, " "), problem)
			}
		}
	}
	if checked < 40 {
		t.Errorf("found only %d command examples in README.md and docs/; the extraction is broken", checked)
	}
}

// TestReadmeIsAFrontPage keeps the README a page that fits in a few
// screens: reference belongs in docs/.
func TestReadmeIsAFrontPage(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const most = 150
	if n := strings.Count(string(text), "\n"); n > most {
		t.Errorf("README.md has %d lines, more than %d: move reference text to a page under docs/ and link it", n, most)
	}
}

// example is one command shown in a document: its words, starting with
// the program, and the line it is on.
type example struct {
	line  int
	words []string
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// commandExamples finds the commands a document shows: shell lines in
// fenced blocks (a "$ " prompt stripped; in a block with prompts, only the
// prompted lines; not those marked "# a mistake") and inline code spans, split into
// simple commands at ; && || | & and "do"/"then", each kept when its
// program (after sudo and VAR=value words) is poolagent, poolagent-run or a
// script under scripts/.
func commandExamples(doc string) []example {
	var out []example
	fenced, prompted := false, false
	lines := strings.Split(doc, "\n")
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			prompted = fenced && blockHasPrompt(lines[i+1:])
			continue
		}
		var spans []string
		if fenced {
			// In a block with "$ " prompts the other lines are output.
			// A line marked "# a mistake" shows an error on purpose.
			if cmd, ok := strings.CutPrefix(trimmed, "$ "); (ok || !prompted) && !strings.HasSuffix(cmd, "# a mistake") {
				spans = []string{cmd}
			}
		} else {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				// A span with ": " quotes a message, not a command.
				if !strings.Contains(m[1], ": ") {
					spans = append(spans, m[1])
				}
			}
		}
		for _, span := range spans {
			for _, words := range simpleCommands(span) {
				out = append(out, example{line: i + 1, words: words})
			}
		}
	}
	return out
}

// blockHasPrompt is true when the fenced block starting at lines has a
// line with a "$ " prompt.
func blockHasPrompt(lines []string) bool {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "```") {
			return false
		}
		if strings.HasPrefix(l, "$ ") {
			return true
		}
	}
	return false
}

// simpleCommands splits a shell line into the simple commands that run
// poolagent, poolagent-run or a shell script, each as its words from the program
// on (after sudo, env and VAR=value words; up to a redirection). Quotes group words; a # outside quotes starts a
// comment.
func simpleCommands(line string) [][]string {
	var cmds [][]string
	var cur []string
	flush := func() {
		for len(cur) > 0 && (cur[0] == "sudo" || cur[0] == "env" || cur[0] == "do" || cur[0] == "then" || isAssignment(cur[0])) {
			cur = cur[1:]
		}
		if len(cur) > 0 && isOurProgram(cur[0]) {
			if i := slices.IndexFunc(cur, func(w string) bool { return strings.ContainsAny(w[:1], "<>") || w == "2>&1" }); i >= 0 {
				cur = cur[:i]
			}
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	var word strings.Builder
	inWord := false
	var quote rune
	endWord := func() {
		if inWord {
			cur = append(cur, word.String())
			word.Reset()
			inWord = false
		}
	}
	runes := []rune(line)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			i = len(runes)
		case r == ' ' || r == '\t' || r == '\\':
			endWord()
		case r == ';' || r == '|' || r == '&':
			endWord()
			flush()
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endWord()
	flush()
	return cmds
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	return ok && name != "" && strings.ToUpper(name) == name && !strings.HasPrefix(name, "-")
}

func isOurProgram(w string) bool {
	return w == "poolagent" || w == "poolagent-run" ||
		strings.HasPrefix(w, "scripts/") && strings.HasSuffix(w, ".sh")
}

// checkExample says what is wrong with one shown command, or "".
func checkExample(app *cli.App, words []string) string {
	switch prog := words[0]; {
	case prog == "poolagent-run":
		return checkFlags(words[1:], runFlags(), "poolagent-run")
	case strings.HasPrefix(prog, "scripts/"):
		return checkScript(words)
	}
	args := words[1:]
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return checkFlags(args, appFlagNames(app), "poolagent")
	}
	if args[0] == "help" {
		// An upper-case word is a placeholder: `poolagent help COMMAND`.
		if len(args) > 1 && strings.ToUpper(args[1]) != args[1] && app.Command(args[1]) == nil {
			return fmt.Sprintf("poolagent has no command %q", args[1])
		}
		return ""
	}
	cmd := app.Command(args[0])
	if cmd == nil || cmd.Hidden {
		return fmt.Sprintf("poolagent has no command %q", args[0])
	}
	if cmd.Name == "run" {
		return checkFlags(args[1:], runFlags(), "poolagent run")
	}
	return checkFlags(args[1:], commandFlagNames(cmd), "poolagent "+cmd.Name)
}

// checkFlags checks every flag word (before a "--") against names.
func checkFlags(args []string, names []string, what string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(names, name) {
			return fmt.Sprintf("%s has no flag %s (accepted: %s)", what, a, strings.Join(names, ", "))
		}
	}
	return ""
}

func commandFlagNames(cmd *cli.Command) []string {
	names := []string{"help", "h"}
	for _, f := range cmd.Flags {
		names = append(names, f.Names()...)
	}
	return names
}

func appFlagNames(app *cli.App) []string {
	app.Setup()
	var names []string
	for _, f := range app.Flags {
		names = append(names, f.Names()...)
	}
	return names
}

var helpFlag = regexp.MustCompile(`(?m)^ +(--[a-z-]+)[^,\n]*(?:, (-[a-z]+))?`)

// runFlags are the flags poolagent run and poolagent-run accept, as the
// help text they both print lists them.
func runFlags() []string {
	var names []string
	for _, m := range helpFlag.FindAllStringSubmatch(client.RunHelp, -1) {
		for _, n := range m[1:] {
			if n != "" {
				names = append(names, strings.TrimLeft(n, "-"))
			}
		}
	}
	return names
}

// checkScript checks a shown scripts/… command: the script exists, is
// executable, and names every flag given to it in its header comment.
func checkScript(words []string) string {
	path := filepath.Join("../..", words[0])
	info, err := os.Stat(path)
	if err != nil {
		return "no such script"
	}
	if info.Mode()&0o111 == 0 {
		return "the script is not executable"
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	for _, a := range words[1:] {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && !strings.Contains(string(text), a) {
			return fmt.Sprintf("%s does not mention %s", words[0], a)
		}
	}
	return ""
}
