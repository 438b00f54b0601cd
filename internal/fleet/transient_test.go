package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTransient: what a start may wait out (etcd not answering) against
// what it must report (a refusal), also wrapped as Open wraps them.
func TestTransient(t *testing.T) {
	b := &Backend{cfg: Config{Endpoints: []string{"https://e:2379"}}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"request timed out", context.DeadlineExceeded, true},
		{"no connection", status.Error(codes.Unavailable, "connection refused"), true},
		{"deadline on the server", status.Error(codes.DeadlineExceeded, "timed out"), true},
		{"no leader", rpctypes.ErrNoLeader, true},
		{"leader changed", rpctypes.ErrLeaderChanged, true},
		{"permission denied", rpctypes.ErrPermissionDenied, false},
		{"authentication failed", rpctypes.ErrAuthFailed, false},
		{"bad request", status.Error(codes.InvalidArgument, "bad"), false},
		{"any other error", errors.New("x"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, b.unreachable(tc.err), fmt.Errorf("grant: %w", tc.err)} {
				if got := transient(err); got != tc.want {
					t.Errorf("transient(%v) = %v, want %v", err, got, tc.want)
				}
			}
		})
	}
}
