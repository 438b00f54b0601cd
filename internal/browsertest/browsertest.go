// Package browsertest renders an HTML page in Debian's headless Chromium
// and finds what it drew, for the tests that check a report as people
// see it (compare's and advise's HTML reports).
package browsertest

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Screenshot renders page in headless Chromium in a window of width ×
// height pixels and returns the picture. Without chromium the test skips,
// or fails under POOLAGENT_REQUIRE_KERNEL=1 (scripts/test.sh installs
// it). POOLAGENT_SCREENSHOT=FILE keeps the PNG.
func Screenshot(t testing.TB, page []byte, width, height int) image.Image {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("POOLAGENT_REQUIRE_KERNEL") == "1" {
			t.Fatalf("chromium not found (scripts/test.sh installs it): %v", err)
		}
		t.Skipf("chromium not found: %v", err)
	}
	dir := t.TempDir()
	file, shot := filepath.Join(dir, "report.html"), filepath.Join(dir, "shot.png")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", width, height),
		"--screenshot="+shot, "file://"+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	if keep := os.Getenv("POOLAGENT_SCREENSHOT"); keep != "" {
		if b, err := os.ReadFile(shot); err == nil {
			t.Logf("screenshot kept in %s (%v)", keep, os.WriteFile(keep, b, 0o644))
		}
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Box is the bounding box of the pixels of img from row minY down that
// have exactly the colour hex ("#rrggbb").
func Box(img image.Image, hex string, minY int) image.Rectangle {
	var want color.RGBA
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &want.R, &want.G, &want.B); err != nil {
		panic(err)
	}
	var box image.Rectangle
	b := img.Bounds()
	for y := max(b.Min.Y, minY); y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(bl>>8) == want.B {
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return box
}
