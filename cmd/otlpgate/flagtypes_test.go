package main

import "testing"

// The flag adapters parse through bytesize and enforce their field's width.
func TestSizeFlags(t *testing.T) {
	var i64 int64
	var i int
	var i32 int32
	if err := (byteSize{&i64}).Set("3GiB"); err != nil || i64 != 3<<30 || (byteSize{&i64}).String() != "3GiB" {
		t.Errorf("byteSize: %d, %v", i64, err)
	}
	if err := (intSize{&i}).Set("16MiB"); err != nil || i != 16<<20 || (intSize{&i}).String() != "16MiB" {
		t.Errorf("intSize: %d, %v", i, err)
	}
	if err := (int32Size{&i32}).Set("1GiB"); err != nil || i32 != 1<<30 {
		t.Errorf("int32Size: %d, %v", i32, err)
	}
	if err := (int32Size{&i32}).Set("2GiB"); err == nil {
		t.Error("int32Size took 2GiB")
	}
	if err := (byteSize{&i64}).Set("lots"); err == nil {
		t.Error("byteSize took a word")
	}
	var list []string
	m := multiFlag{&list}
	m.Set("a")
	m.Set("b")
	if m.String() != "a b" {
		t.Errorf("multiFlag: %q", m.String())
	}
}
