// Package layout holds the test that checks the import rules every package's doc.go states: the
// otlpgate packages each may import, and the packages nothing (or only tests) may import. A rule
// changed in a doc.go is changed in the table of layout_test.go in the same commit.
//
// It has no code outside its test and is imported by nothing.
package layout
