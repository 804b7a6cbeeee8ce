package nemesis

import (
	"strings"
	"testing"
)

// TestReportMemPerItem: a work queue's memory is held to its bound per
// item, and the report says so: its summary column shows the most per
// key or per item, never a queue's whole beside the per-key bound, and
// the table has a row for every key any strategy measured.
func TestReportMemPerItem(t *testing.T) {
	s := Soak{Results: []*Result{
		{Strategy: "quorum", LiveOK: true, MemChecked: true, MemOK: true, MemBound: 512,
			Mem: []Mem{{Key: "plain", Bytes: 72}}},
		{Strategy: "single", LiveOK: true, MemChecked: true, MemOK: true, MemBound: 512,
			Mem: []Mem{{Key: "plain", Bytes: 120}, {Key: "claims jobs", Bytes: 704, Per: 8}}},
	}}
	md := s.Markdown()
	if !strings.Contains(md, "| single | 0.00 s |  | 120 B | 512 B |") {
		t.Errorf("summary: want single's most per key 120 B (the queue's 704 B is 88 B an item):\n%s", md)
	}
	if !strings.Contains(md, `| "claims jobs" | – | 704 (8 items, 88 each) |`) {
		t.Errorf("table: want the queue's row, per item:\n%s", md)
	}
}
