package compare

import (
	"bytes"
	"image"
	"testing"

	"github.com/poolagent/poolagent/internal/browsertest"
)

// TestHTMLReportInChromium renders a report as people see it, in Debian's
// headless Chromium, and checks the picture: the group's chart is readable
// (hundreds of pixels wide and tall), shows the predicted and the measured
// bars together in one chart, and draws the quota line.
func TestHTMLReportInChromium(t *testing.T) {
	// One capped group over eight periods, throttled in most of them.
	r := fixtureReport(true)
	r.Groups = r.Groups[1:]
	var predicted, measured []Window
	for i := range 8 {
		predicted = append(predicted, Window{RanUsec: 20000, ThrottledUsec: uint64(10000 * i)})
		measured = append(measured, Window{RanUsec: 19500, ThrottledUsec: uint64(9000*i + 500)})
	}
	r.Groups[0].Runs[0].KernelWindows, r.Groups[0].Runs[0].MeasuredWindows = predicted, measured
	r.Finish()

	img := screenshot(t, r)

	// The legend comes first, with a swatch of each colour; the bars are
	// below it.
	legend := browsertest.Box(img, colourPredictedRan, 0)
	below := legend.Min.Y + 20
	predictedRan := browsertest.Box(img, colourPredictedRan, below)
	measuredRan := browsertest.Box(img, colourMeasuredRan, below)
	bars := predictedRan.Union(measuredRan).Union(browsertest.Box(img, colourPredictedThr, below)).Union(browsertest.Box(img, colourMeasuredThr, below))
	quota := browsertest.Box(img, colourQuota, below)
	t.Logf("screenshot %v: legend at y=%d, bars %v, predicted ran %v, measured ran %v, quota %v", img.Bounds(), legend.Min.Y, bars, predictedRan, measuredRan, quota)
	if predictedRan.Empty() || measuredRan.Empty() {
		t.Fatalf("the predicted (%v) or the measured (%v) bars are not drawn", predictedRan, measuredRan)
	}
	if bars.Dx() < 600 || bars.Dy() < 150 {
		t.Errorf("the chart's bars cover %dx%d px; want at least 600x150 to be readable", bars.Dx(), bars.Dy())
	}
	// Together: both kinds of bar stand on the same baseline, in one chart.
	if predictedRan.Max.Y != measuredRan.Max.Y {
		t.Errorf("predicted bars end at y=%d, measured at y=%d: not one chart", predictedRan.Max.Y, measuredRan.Max.Y)
	}
	if quota.Dx() < 600 || quota.Dy() > 4 {
		t.Errorf("the quota line covers %dx%d px; want a line across the chart", quota.Dx(), quota.Dy())
	}
}

// TestHTMLMissMarkInChromium: a period whose predicted throttled time
// misses the target (about 58 ms predicted against 8 ms measured) carries
// a mark above its bars in the chart, and the group's heading and verdict
// say "missed" in the same colour.
func TestHTMLMissMarkInChromium(t *testing.T) {
	r := fixtureReport(true)
	r.Groups = r.Groups[1:]
	var predicted, measured []Window
	for range 8 {
		predicted = append(predicted, Window{RanUsec: 20000, ThrottledUsec: 20000})
		measured = append(measured, Window{RanUsec: 20000, ThrottledUsec: 20000})
	}
	predicted[2].ThrottledUsec, measured[2].ThrottledUsec = 58000, 8000
	r.Groups[0].Runs[0].KernelWindows, r.Groups[0].Runs[0].MeasuredWindows = predicted, measured
	r.Groups[0].Runs[0].Kernel.ThrottledUsec = 200000 // the group misses too
	r.Finish()
	if len(r.Groups[0].Misses) == 0 {
		t.Fatalf("the fixture's group meets its target; want a miss")
	}
	img := screenshot(t, r)
	legend := browsertest.Box(img, colourPredictedRan, 0).Min.Y
	bars := browsertest.Box(img, colourPredictedRan, legend+20).Union(browsertest.Box(img, colourMeasuredRan, legend+20))
	above := browsertest.Box(img, colourMiss, 0)
	period := browsertest.Box(img, colourMiss, legend+16)
	t.Logf("screenshot %v: legend at y=%d, bars %v, first miss mark %v, marks in the chart %v", img.Bounds(), legend, bars, above, period)
	if above.Empty() || above.Min.Y >= legend {
		t.Errorf("no miss mark above the chart (heading or verdict): marks %v, legend at y=%d", above, legend)
	}
	// The period mark: over the third of eight slots, above the bars, no
	// wider than a slot.
	slot := bars.Dx() / 8
	centre := (period.Min.X + period.Max.X) / 2
	if period.Empty() || period.Dx() > slot || centre < bars.Min.X+2*slot || centre > bars.Min.X+3*slot || period.Max.Y > bars.Min.Y {
		t.Errorf("the missed period's mark is %v; want it above the bars %v, within the third slot of %d px", period, bars, slot)
	}
}

// screenshot renders r as HTML in Debian's headless Chromium and returns
// the picture.
func screenshot(t *testing.T, r *Report) image.Image {
	t.Helper()
	var page bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	return browsertest.Screenshot(t, page.Bytes(), 1100, 900)
}
