package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// wrapper puts a `poolagent` that runs this test binary as poolagent into
// a directory of its own and returns the directory.
func wrapper(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", envAsMain, os.Args[0])
	if err := os.WriteFile(filepath.Join(dir, "poolagent"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tool returns the path of a program the test runs (a shell, groff);
// under POOLAGENT_REQUIRE_KERNEL=1 (scripts/test.sh, CI) its absence
// fails.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("POOLAGENT_REQUIRE_KERNEL") == "1" {
		t.Fatalf("%s not found (scripts/test.sh installs it): %v", name, err)
	}
	t.Skipf("%s not found: %v", name, err)
	return ""
}

// TestBashCompletion sources `poolagent completion bash` in bash and
// completes words as bash would on Tab.
func TestBashCompletion(t *testing.T) {
	bash := tool(t, "bash")
	path := wrapper(t) + ":" + os.Getenv("PATH")
	tests := []struct {
		words string // COMP_WORDS, the last one being completed
		want  string // COMPREPLY
	}{
		{"poolagent si", "simulate"},
		{"poolagent c", "compare check classifiers completion"},
		{"poolagent plan --ac", "--active"},
		{"poolagent completion ", "bash zsh"},
	}
	for _, tc := range tests {
		t.Run(tc.words, func(t *testing.T) {
			words := strings.Split(tc.words, " ")
			script := fmt.Sprintf(`source <(poolagent completion bash)
COMP_WORDS=(%s); COMP_CWORD=%d; _poolagent; echo "${COMPREPLY[*]}"`, quoteWords(words), len(words)-1)
			cmd := exec.Command(bash, "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+path)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("completing %q gave %q, want %q", tc.words, got, tc.want)
			}
		})
	}
}

func quoteWords(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, fmt.Sprintf("%q", w))
	}
	return strings.Join(q, " ")
}

// TestZshCompletion checks the zsh script's syntax with zsh itself and the
// "name:description" lines it asks the binary for.
func TestZshCompletion(t *testing.T) {
	zsh := tool(t, "zsh")
	stdout, _, err := runApp(t, "completion", "zsh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(zsh, "-n")
	cmd.Stdin = strings.NewReader(stdout)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	// As the script runs it: `env 0=zsh poolagent …`; the CLI framework
	// describes the commands when $0 ends in zsh.
	cmd = poolagent("--generate-bash-completion")
	cmd.Env = append(cmd.Env, "0=zsh")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "\nplan:show the cgroup limits") {
		t.Errorf("zsh's completion words have no described plan command:\n%s", out)
	}
}

// TestManPage renders `poolagent man` with groff as man(1) would, with
// warnings on, and checks it has every command and each command's flags,
// run's own options among them.
func TestManPage(t *testing.T) {
	groff := tool(t, "groff")
	page, _, err := runApp(t, "man")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(groff, "-k", "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("groff: %v\n%s", err, stderr.String())
	}
	for _, c := range newApp().Commands {
		if c.Name == "help" {
			continue // the man page is the help
		}
		if c.Hidden {
			if strings.Contains(page, ".SS "+c.Name+"\n") {
				t.Errorf("the man page shows the hidden command %s", c.Name)
			}
			continue
		}
		if !strings.Contains(page, ".SS "+c.Name+"\n") {
			t.Errorf("the man page has no section for %s", c.Name)
		}
		for _, f := range c.Flags {
			if !strings.Contains(page, `\fB\-\-`+roff(f.Names()[0])) {
				t.Errorf("the man page does not show %s --%s", c.Name, f.Names()[0])
			}
		}
	}
	// run parses its own flags (client.RunHelp lists them).
	_, run, _ := strings.Cut(page, ".SS run\n")
	run, _, _ = strings.Cut(run, ".SS ")
	for _, opt := range []string{`\-\-pool NAME`, `\-\-stats FORMAT`, `\-\-socket PATH`} {
		if !strings.Contains(run, opt) {
			t.Errorf("the man page's run section has no %s:\n%s", opt, run)
		}
	}
}

// TestSlimManPage renders `poolagent man poolagent-run` and `poolagent
// man poolagent-oci` with groff, with warnings on, and checks each has
// its synopsis, every paragraph of its help and every option; another
// page name is refused.
func TestSlimManPage(t *testing.T) {
	groff := tool(t, "groff")
	for name, wants := range map[string][]string{
		"poolagent-run": {
			"poolagent-run [--pool NAME] [--stats text|json] [--socket PATH] -- CMD [ARGS...]",
			"Asks the daemon to admit a query", "Without --stats the query runs in place",
			"--pool NAME, -p NAME run in pool NAME", "--stats FORMAT", "--socket PATH", "SEE ALSO poolagent(1)",
		},
		"poolagent-oci": {
			"NAME poolagent-oci - an OCI runtime that puts containers in resource pools",
			"poolagent-oci [--runtime-path PATH] [RUNTIME-OPTIONS...] COMMAND [ARGS...]",
			"Container engines (podman, Docker,", "When the kernel's OOM killer ends a process of the container",
			"--runtime-path PATH the runtime to run", "--help, -h", "POOLAGENT_SOCKET the daemon's socket", "SEE ALSO poolagent(1)",
		},
	} {
		page, _, err := runApp(t, "man", name)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(groff, "-k", "-man", "-Tutf8", "-ww")
		cmd.Stdin = strings.NewReader(page)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Fatalf("groff %s: %v\n%s", name, err, stderr.String())
		}
		// groff emboldens by overstriking; compare the letters alone.
		text := strings.Join(strings.Fields(regexp.MustCompile(".\b").ReplaceAllString(string(out), "")), " ")
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("the rendered page %s has no %q:\n%s", name, want, text)
			}
		}
	}
	if _, _, err := runApp(t, "man", "poolagent-rn"); err == nil || !strings.Contains(err.Error(), `no page "poolagent-rn"`) {
		t.Errorf("man poolagent-rn: %v, want a refusal naming the page", err)
	}
}
