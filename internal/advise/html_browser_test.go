package advise

import (
	"bytes"
	"testing"

	"github.com/poolagent/poolagent/internal/browsertest"

	"github.com/poolagent/poolagent/internal/history"
)

// TestNodeHTMLInChromium renders `advise --all --report` for the
// three-pool node of TestGoldenNode in Debian's headless Chromium and
// checks the picture: each pool's measured bars and the replay's under
// the advice stand on one baseline in a chart hundreds of pixels wide,
// with the current quota drawn across it.
func TestNodeHTMLInChromium(t *testing.T) {
	var traces []*history.Trace
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
	img := browsertest.Screenshot(t, page.Bytes(), 1400, 1800)
	legend := browsertest.Box(img, colourMeasuredRan, 0)
	below := legend.Min.Y + 20
	measured, advised := browsertest.Box(img, colourMeasuredRan, below), browsertest.Box(img, colourAdvisedRan, below)
	quota := browsertest.Box(img, colourQuotaNow, below)
	t.Logf("screenshot %v: legend at y=%d, measured %v, advised %v, quota %v", img.Bounds(), legend.Min.Y, measured, advised, quota)
	if measured.Empty() || advised.Empty() {
		t.Fatalf("the measured (%v) or the advised (%v) bars are not drawn", measured, advised)
	}
	if thr := browsertest.Box(img, colourMeasuredThr, below); thr.Dy() < 100 {
		t.Errorf("the measured throttled time rises %d px; want at least 100 to be readable", thr.Dy())
	}
	if measured.Max.Y != advised.Max.Y {
		t.Errorf("measured bars end at y=%d, advised at y=%d: not one chart", measured.Max.Y, advised.Max.Y)
	}
	if quota.Dx() < 600 {
		t.Errorf("the quota line covers %d px; want a line across the chart", quota.Dx())
	}
}
