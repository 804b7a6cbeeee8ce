package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// bar is one row of a horizontal bar panel; tick, when > 0, marks a second
// value on the same row (a p99 next to a p50 bar).
type bar struct {
	label string
	lib   string
	value float64
	tick  float64
	text  string
}

var libColor = map[string]string{
	"floor":     "#9e9e9e",
	"dlock":     "#1f6feb",
	"redislock": "#e8871e",
	"redsync":   "#c4314b",
}

const (
	svgWidth  = 1120
	labelW    = 380
	barW      = 460
	rowH      = 20
	panelHead = 30
	panelFoot = 16
)

// renderSVG draws the comparison as stacked horizontal bar panels, by
// hand: no dependency.
func renderSVG(rs []Result, m Meta) []byte {
	var lat, thr, acq, wait []bar
	for _, row := range uncontendedRows(rs) {
		if one := row[0]; one != nil && one.XRTT != nil {
			lat = append(lat, bar{label: label(*one) + " · " + one.Client, lib: one.Library, value: *one.XRTT,
				text: fmt.Sprintf("%.2f (p99 %.2f) xRTT · %.0f µs", *one.XRTT, *one.XRTTp99, *one.P50us)})
		}
		if par := row[1]; par != nil && par.OpsPerS != nil {
			thr = append(thr, bar{label: label(*par) + " · " + par.Client, lib: par.Library, value: *par.OpsPerS,
				text: fmt.Sprintf("%.1fk ops/s", *par.OpsPerS/1000)})
		}
	}
	for _, r := range rs {
		if r.Case != "contention" || r.AcquisitionsPerS == nil {
			continue
		}
		l := label(r) + " · " + r.Client
		if r.Library != "dlock" {
			l += " · " + r.Variant
		}
		acq = append(acq, bar{label: l, lib: r.Library, value: *r.AcquisitionsPerS,
			text: fmt.Sprintf("%.0f/s, self %.0f%%", *r.AcquisitionsPerS, *r.SelfShare*100)})
		wait = append(wait, bar{label: l, lib: r.Library, value: *r.WaitP99ms, tick: *r.WaitMaxms,
			text: fmt.Sprintf("p99 %.1f ms (max %.0f)", *r.WaitP99ms, *r.WaitMaxms)})
	}
	var body bytes.Buffer
	y := 44
	y = panel(&body, y, "Lock+unlock latency at c=1, p50 in xRTT: one EVALSHA on the same client (lower is better)", lat, false,
		ref{2.15, "single target 2.15"})
	y = panel(&body, y, "Lock+unlock throughput at c=64, distinct keys (higher is better)", thr, false)
	y = panel(&body, y, fmt.Sprintf("Contention: acquisitions/s, %d goroutines on one key, hold %s (higher is better)", contenders, hold), acq, false)
	y = panel(&body, y, "Contention: acquire wait p99 in ms, log scale (tick: max; lower is better)", wait, true,
		ref{11, "single target 11 ms"})

	var out bytes.Buffer
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, y+10, svgWidth, y+10)
	fmt.Fprintf(&out, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	title := fmt.Sprintf("dlock %s vs bsm/redislock vs go-redsync/redsync — %s, %d CPUs, redis-server %s, median of %d run(s)", m.Commit, m.GoVersion, m.CPUs, m.RedisVersion, m.Runs)
	if m.Quick {
		title += ", quick"
	}
	fmt.Fprintf(&out, `<text x="10" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", esc(title))
	x := 10
	for _, lib := range []string{"dlock", "redislock", "redsync", "floor"} {
		fmt.Fprintf(&out, `<rect x="%d" y="28" width="10" height="10" fill="%s"/><text x="%d" y="37">%s</text>`+"\n", x, libColor[lib], x+14, esc(lib))
		x += 100
	}
	out.Write(body.Bytes())
	out.WriteString("</svg>\n")
	return out.Bytes()
}

// ref is a vertical reference line across a panel: a target.
type ref struct {
	value float64
	label string
}

func panel(w *bytes.Buffer, y int, title string, bars []bar, logScale bool, refs ...ref) int {
	if len(bars) == 0 {
		return y
	}
	fmt.Fprintf(w, `<text x="10" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", y+18, esc(title))
	y += panelHead
	hi := 0.0
	lo := math.Inf(1)
	for _, r := range refs {
		hi = max(hi, r.value)
	}
	for _, b := range bars {
		hi = max(hi, b.value, b.tick)
		if b.value > 0 {
			lo = min(lo, b.value)
		}
	}
	scale := func(v float64) float64 {
		if hi <= 0 || v <= 0 {
			return 0
		}
		if !logScale {
			return v / hi * barW
		}
		// Log from a decade under the smallest value up to the largest.
		base := math.Pow(10, math.Floor(math.Log10(lo))-0)
		if base >= hi {
			return barW
		}
		return math.Max(2, math.Log10(v/base)/math.Log10(hi/base)*barW)
	}
	x0 := labelW
	for i, b := range bars {
		ry := y + i*rowH
		if i%2 == 0 {
			fmt.Fprintf(w, `<rect x="0" y="%d" width="%d" height="%d" fill="#f4f6f8"/>`+"\n", ry, svgWidth, rowH)
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", x0-6, ry+14, esc(b.label))
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, ry+4, scale(b.value), rowH-8, libColor[b.lib])
		if b.tick > 0 {
			tx := float64(x0) + scale(b.tick)
			fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333" stroke-width="2"/>`+"\n", tx, ry+2, tx, ry+rowH-2)
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="#333">%s</text>`+"\n", x0+barW+8, ry+14, esc(b.text))
	}
	top := y
	y += len(bars) * rowH
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", x0, top, x0, y)
	for _, r := range refs {
		rx := float64(x0) + scale(r.value)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#2da44e" stroke-width="1.5" stroke-dasharray="4 3"/>`+"\n", rx, top-4, rx, y)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" fill="#2da44e" font-size="10" text-anchor="middle">%s</text>`+"\n", rx, y+11, esc(r.label))
	}
	return y + panelFoot
}

func esc(s string) string { return html.EscapeString(s) }
