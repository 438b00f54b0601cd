package pooltree

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// inotifyEvents encodes events as read(2) returns them from an inotify
// instance: struct inotify_event {wd, mask, cookie, len} in host order,
// each followed by len bytes of name (none here).
func inotifyEvents(events ...unix.InotifyEvent) []byte {
	var b bytes.Buffer
	for _, ev := range events {
		binary.Write(&b, binary.NativeEndian, ev)
	}
	return b.Bytes()
}

// TestDispatch: an event wakes the waiter of its watch; IN_IGNORED (the
// cgroup removed) also forgets the watch; IN_Q_OVERFLOW, which the kernel
// sends on no watch when it dropped events, wakes every waiter.
func TestDispatch(t *testing.T) {
	tests := []struct {
		name      string
		events    []unix.InotifyEvent
		woken     [2]bool // waiters of watches 1 and 2
		forgotten bool    // watch 1 no longer registered
	}{
		{"modify wakes its waiter", []unix.InotifyEvent{{Wd: 1, Mask: unix.IN_MODIFY}}, [2]bool{true, false}, false},
		{"removal wakes and forgets", []unix.InotifyEvent{{Wd: 1, Mask: unix.IN_IGNORED}}, [2]bool{true, false}, true},
		{"unknown watch wakes nobody", []unix.InotifyEvent{{Wd: 7, Mask: unix.IN_MODIFY}}, [2]bool{}, false},
		{"overflow wakes everyone", []unix.InotifyEvent{{Wd: -1, Mask: unix.IN_Q_OVERFLOW}}, [2]bool{true, true}, false},
		{"overflow after an event", []unix.InotifyEvent{{Wd: 2, Mask: unix.IN_MODIFY}, {Wd: -1, Mask: unix.IN_Q_OVERFLOW}}, [2]bool{true, true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &emptyWatcher{wake: map[int32]chan<- struct{}{}}
			var chans [2]chan struct{}
			for i := range chans {
				chans[i] = make(chan struct{}, 1)
				w.wake[int32(i+1)] = chans[i]
			}
			w.dispatch(inotifyEvents(tc.events...))
			for i, ch := range chans {
				if got := len(ch) == 1; got != tc.woken[i] {
					t.Errorf("waiter of watch %d woken: %v, want %v", i+1, got, tc.woken[i])
				}
			}
			if _, ok := w.wake[1]; ok == tc.forgotten {
				t.Errorf("watch 1 registered: %v, want %v", ok, !tc.forgotten)
			}
		})
	}
}

// FuzzDispatch feeds dispatch arbitrary bytes as an inotify read: it must
// neither panic nor read past the buffer, whatever the lengths say.
func FuzzDispatch(f *testing.F) {
	f.Add(inotifyEvents(unix.InotifyEvent{Wd: 1, Mask: unix.IN_MODIFY}, unix.InotifyEvent{Wd: -1, Mask: unix.IN_Q_OVERFLOW}))
	f.Add(inotifyEvents(unix.InotifyEvent{Wd: 1, Mask: unix.IN_IGNORED, Len: 1 << 31}))
	f.Fuzz(func(t *testing.T, buf []byte) {
		w := &emptyWatcher{wake: map[int32]chan<- struct{}{1: make(chan struct{}, 1)}}
		w.dispatch(buf)
	})
}
