package faults

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	var tb Table
	tb.Add(Row{Scenario: "10 later", Strategy: "single", Client: "go-redis", Pass: true})
	tb.Add(Row{Scenario: "2 node loss", Strategy: "quorum", Client: "valkey-go", Observed: "a|b",
		Holders: Int(3), Acquired: Int(19), Attempts: Int(20), TimeToFailMs: Ms(1.26)})
	tb.Add(Row{Scenario: "2 node loss", Strategy: "quorum", Client: "go-redis"})

	rows := tb.Rows()
	var got []string
	for _, r := range rows {
		got = append(got, r.Scenario+"/"+r.Client)
	}
	if want := "2 node loss/go-redis,2 node loss/valkey-go,10 later/go-redis"; strings.Join(got, ",") != want {
		t.Fatalf("order = %v; want %v", got, want)
	}

	md := tb.Markdown()
	for _, want := range []string{
		"| 2 node loss | – | quorum | valkey-go | – | 3 | – | – | – | – | 19/20 | 1.3 | a\\|b | FAIL |",
		"| 10 later | – | single | go-redis | – | – | – | – | – | – | – | – | – | pass |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}

	js, err := tb.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back []Row
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 3 || back[1].Holders == nil || *back[1].Holders != 3 || back[0].Holders != nil || *back[1].TimeToFailMs != 1.3 {
		t.Fatalf("JSON round trip = %+v", back)
	}
}
