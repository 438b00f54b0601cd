package advise

import (
	"bytes"
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

// TestNodeHTMLInChromium renders `advise --all --report` for the
// three-pool node of TestGoldenNode in Debian's headless Chromium and
// checks the picture: each pool's measured bars and the replay's under
// the advice stand on one baseline in a chart hundreds of pixels wide,
// with the current quota drawn across it.
func TestNodeHTMLInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("POOLAGENT_REQUIRE_KERNEL") == "1" {
			t.Fatalf("chromium not found (scripts/test.sh installs it): %v", err)
		}
		t.Skipf("chromium not found: %v", err)
	}
	var traces []*Trace
	for _, c := range []struct{ file, pool string }{{"chapter-parallelism.json", "olap"}, {"chapter-burst.json", "batch"}} {
		tr := readTrace(t, c.file)
		tr.Pool = c.pool
		traces = append(traces, tr)
	}
	b := Budget{MaxThrottledRatio: 0.1}
	pools, err := AdviseNode(traces, b)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := WriteNodeHTML(&page, pools, b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file, shot := filepath.Join(dir, "report.html"), filepath.Join(dir, "shot.png")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--hide-scrollbars", "--window-size=1400,1800",
		"--screenshot="+shot, "file://"+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	if keep := os.Getenv("POOLAGENT_SCREENSHOT"); keep != "" {
		if png, err := os.ReadFile(shot); err == nil {
			t.Logf("screenshot kept in %s (%v)", keep, os.WriteFile(keep, png, 0o644))
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
	legend := colourBox(img, colourMeasuredRan, 0)
	below := legend.Min.Y + 20
	measured, advised := colourBox(img, colourMeasuredRan, below), colourBox(img, colourAdvisedRan, below)
	quota := colourBox(img, colourQuotaNow, below)
	t.Logf("screenshot %v: legend at y=%d, measured %v, advised %v, quota %v", img.Bounds(), legend.Min.Y, measured, advised, quota)
	if measured.Empty() || advised.Empty() {
		t.Fatalf("the measured (%v) or the advised (%v) bars are not drawn", measured, advised)
	}
	if thr := colourBox(img, colourMeasuredThr, below); thr.Dy() < 100 {
		t.Errorf("the measured throttled time rises %d px; want at least 100 to be readable", thr.Dy())
	}
	if measured.Max.Y != advised.Max.Y {
		t.Errorf("measured bars end at y=%d, advised at y=%d: not one chart", measured.Max.Y, advised.Max.Y)
	}
	if quota.Dx() < 600 {
		t.Errorf("the quota line covers %d px; want a line across the chart", quota.Dx())
	}
}

// colourBox is the bounding box of the pixels of img from row minY down
// that have exactly the colour hex ("#rrggbb").
func colourBox(img image.Image, hex string, minY int) image.Rectangle {
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
