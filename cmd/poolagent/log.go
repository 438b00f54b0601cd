package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// newLogger returns the daemon's logger, writing to w. When w is the
// journal's stream (systemd sets JOURNAL_STREAM to its "DEVICE:INODE",
// journalStream checks it against w), every line starts with the syslog
// priority journald reads, "<3>" for an error, and carries no time, which
// journald records itself; so `journalctl -p err -u poolagent` shows the
// errors. Anywhere else it is slog's text format with the time.
func newLogger(w io.Writer, level slog.Level, journalStreamEnv string) *slog.Logger {
	f, isFile := w.(*os.File)
	if !isFile || !journalStream(f, journalStreamEnv) {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	}
	out := &priorityWriter{w: w}
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	return slog.New(journalHandler{
		inner: slog.NewTextHandler(out, &slog.HandlerOptions{Level: level, ReplaceAttr: noTime}),
		out:   out,
	})
}

// journalStream says whether f is the stream JOURNAL_STREAM names: the
// variable holds the device and inode numbers of the journal's socket,
// "DEVICE:INODE" in decimal, as systemd.exec(5) describes.
func journalStream(f *os.File, env string) bool {
	var dev, ino uint64
	if _, err := fmt.Sscanf(env, "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

// journalHandler prefixes each record's line with its syslog priority.
type journalHandler struct {
	inner slog.Handler
	out   *priorityWriter
}

// priorityWriter writes each line with the prefix of the record being
// handled; mu is held from choosing the prefix to the line's write.
type priorityWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *priorityWriter) Write(line []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(line)); err != nil {
		return 0, err
	}
	return len(line), nil
}

func (h journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = syslogPriority(r.Level)
	return h.inner.Handle(ctx, r)
}

func (h journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return journalHandler{inner: h.inner.WithAttrs(attrs), out: h.out}
}

func (h journalHandler) WithGroup(name string) slog.Handler {
	return journalHandler{inner: h.inner.WithGroup(name), out: h.out}
}

// syslogPriority is the sd-daemon(3) prefix of a level: "<3>" error,
// "<4>" warning, "<6>" info, "<7>" debug.
func syslogPriority(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>"
	case l >= slog.LevelWarn:
		return "<4>"
	case l >= slog.LevelInfo:
		return "<6>"
	}
	return "<7>"
}
