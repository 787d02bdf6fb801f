package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// parseSweep reads "from:to:step" offered rates, e.g. "50:400:50".
func parseSweep(s string) ([]float64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("-sweep %q: want from:to:step, e.g. 50:400:50", s)
	}
	var v [3]float64
	for i, p := range parts {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("-sweep %q: %q is not a positive rate", s, p)
		}
		v[i] = f
	}
	if v[1] < v[0] {
		return nil, fmt.Errorf("-sweep %q: to is below from", s)
	}
	var rates []float64
	for r := v[0]; r <= v[1]+1e-9; r += v[2] {
		rates = append(rates, r)
	}
	return rates, nil
}

// sustained reports whether a step kept up with its offered load: every
// order placed and ended as its kind must, at least 95% of the offered
// rate, and p99 saga latency within bound (milliseconds).
func sustained(r StepResult, boundMS float64) bool {
	return r.Refused == 0 && r.Unfinished == 0 && r.Unexpected == 0 &&
		r.Throughput >= 0.95*r.OfferedRate && r.Saga.P99 <= boundMS
}

// best is the highest offered rate sustained, 0 if none was.
func best(steps []StepResult, boundMS float64) float64 {
	var b float64
	for _, r := range steps {
		if sustained(r, boundMS) {
			b = math.Max(b, r.OfferedRate)
		}
	}
	return b
}

// chart writes an SVG of a sweep: throughput against offered rate on top
// (the diagonal is keeping up), p50 and p99 saga latency below with the
// p99 bound dashed. Hand-drawn, so the tool needs no plotting library.
func chart(w io.Writer, title string, steps []StepResult, boundMS float64) error {
	const (
		width, height = 720, 560
		left, right   = 70, 20
		panelH        = 200
		top1, top2    = 50, 310
	)
	var maxRate, maxTput, maxLat float64
	for _, r := range steps {
		maxRate = math.Max(maxRate, r.OfferedRate)
		maxTput = math.Max(maxTput, r.Throughput)
		maxLat = math.Max(maxLat, r.Saga.P99)
	}
	maxRate, maxTput, maxLat = niceCeil(maxRate), niceCeil(math.Max(maxTput, maxRate)), niceCeil(math.Max(maxLat, boundMS))
	plotW := float64(width - left - right)
	x := func(rate float64) float64 { return float64(left) + rate/maxRate*plotW }
	y := func(top int, v, vmax float64) float64 { return float64(top+panelH) - v/vmax*panelH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="24" font-size="15">%s</text>`+"\n", left, escape(title))
	panel := func(top int, vmax float64, label string) {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", left, top, plotW, panelH)
		for i := 0; i <= 4; i++ {
			v := vmax * float64(i) / 4
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text><line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n",
				left-6, y(top, v, vmax)+4, trim(v), left, float64(left)+plotW, y(top, v, vmax), y(top, v, vmax))
		}
		fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`+"\n", top+panelH/2, top+panelH/2, label)
	}
	line := func(top int, vmax float64, color, dash string, val func(StepResult) float64, name string, legendY int) {
		var pts []string
		for _, r := range steps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.OfferedRate), y(top, val(r), vmax)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`+"\n", strings.Join(pts, " "), color, dash)
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`, xy[0], xy[1], color)
		}
		fmt.Fprintf(&b, "\n"+`<text x="%d" y="%d" fill="%s">%s</text>`+"\n", left+10, legendY, color, name)
	}
	panel(top1, maxTput, "sagas/s")
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb" stroke-dasharray="4 4"/>`+"\n",
		x(0), y(top1, 0, maxTput), x(maxRate), y(top1, maxRate, maxTput))
	line(top1, maxTput, "#1f77b4", "", func(r StepResult) float64 { return r.Throughput }, "throughput (dashed: offered)", top1+16)
	panel(top2, maxLat, "saga latency ms")
	fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="6 4"/>`+"\n",
		left, float64(left)+plotW, y(top2, boundMS, maxLat), y(top2, boundMS, maxLat))
	line(top2, maxLat, "#2ca02c", "", func(r StepResult) float64 { return r.Saga.P50 }, "p50", top2+16)
	line(top2, maxLat, "#d62728", "", func(r StepResult) float64 { return r.Saga.P99 }, fmt.Sprintf("p99 (dashed: bound %sms)", trim(boundMS)), top2+32)
	for i := 0; i <= 4; i++ {
		v := maxRate * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), top2+panelH+18, trim(v))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">offered rate, orders/s</text>`+"\n", float64(left)+plotW/2, top2+panelH+38)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
