package main

// dlockSubjects lists dlock's strategies on both clients; variant labels
// contention cases.
func dlockSubjects(variant string) []subject { return nil }
