package sqlfence

import (
	"os"
	"strings"
	"testing"
)

// The statements the helpers send are the ones their doc comments and
// docs/fencing.md print, for the table and columns printed there.
func TestStatementsDocumented(t *testing.T) {
	reports := Table{Name: "reports", Key: "id"}
	statements := map[string]string{
		"Table.UpdateTx": reports.updateSQL("token", []string{"body"}),
		"Table.UpsertTx": reports.upsertSQL("token", []string{"body"}),
		"Fences.Raise":   raiseSQL("fences"),
	}
	for _, src := range []struct{ file, open, close string }{
		{"../../docs/fencing.md", "```sql", "```"},
		{"sqlfence.go", "//", ""},
	} {
		b, err := os.ReadFile(src.file)
		if err != nil {
			t.Fatal(err)
		}
		shown := printed(string(b), src.file == "sqlfence.go")
		for name, q := range statements {
			if !shown[q] {
				t.Errorf("%s does not print %s's statement:\n%s", src.file, name, q)
			}
		}
	}
}

// printed returns the SQL statements text shows, each on one line with
// single spaces: those of its ```sql blocks, or, in Go source (code), of
// the doc comments' indented blocks.
func printed(text string, code bool) map[string]bool {
	var block []string
	var blocks [][]string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if code {
			c, ok := strings.CutPrefix(l, "//\t")
			if ok {
				block = append(block, c)
				continue
			}
			if len(block) > 0 {
				blocks, block = append(blocks, block), nil
			}
			continue
		}
		switch t := strings.TrimSpace(l); {
		case t == "```sql":
			in = true
		case in && t == "```":
			blocks, block, in = append(blocks, block), nil, false
		case in:
			block = append(block, l)
		}
	}
	shown := map[string]bool{}
	for _, b := range blocks {
		for q := range strings.SplitSeq(strings.Join(b, " "), ";") {
			if q = strings.Join(strings.Fields(q), " "); q != "" {
				shown[q] = true
			}
		}
	}
	return shown
}

// Printed is printed, for the tests that run what the docs print.
var Printed = printed
