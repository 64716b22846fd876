// Package layout holds the test that checks the import rules every package's doc.go states: the
// otlpgate packages each may import, and the packages nothing (or only tests) may import. A rule
// changed in a doc.go is changed in the table of layout_test.go in the same commit. It also
// checks that `make test` runs every test: the tests of files built without -race only must be
// selected by the second, race-free pass (racefree_test.go). And it keeps the map current
// (docs_test.go): every file, package and Go name docs/architecture.md writes in backquotes
// exists, its package map lists every package, and the README stays a front page of at most 200
// lines; and every file that says it is generated is marked so in .gitattributes
// (generated_test.go).
//
// It has no code outside its test and is imported by nothing.
package layout
