package fastpath

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// BenchmarkValidUTF8 compares validUTF8 with utf8.Valid on 1 KiB of ASCII, of text in several
// scripts, and of CJK.
func BenchmarkValidUTF8(b *testing.B) {
	texts := []struct{ name, s string }{
		{"ascii", strings.Repeat("GET /api/v2/orders?customer=8812 200 OK; ", 25)},
		{"mixed", strings.Repeat("Bestellung für Jürgen Weiß: Ошибка подключения, 注文処理中にエラー ✅ ", 10)},
		{"cjk", strings.Repeat("注文処理中にエラーが発生しました。在庫サービスが応答していません。", 10)},
	}
	for _, tx := range texts {
		p := []byte(tx.s)
		for _, f := range []struct {
			name  string
			valid func([]byte) bool
		}{{"validUTF8", validUTF8}, {"utf8.Valid", utf8.Valid}} {
			b.Run(tx.name+"/"+f.name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.SetBytes(int64(len(p)))
				start := threadCPU()
				for b.Loop() {
					if !f.valid(p) {
						b.Fatal("invalid")
					}
				}
				if cpu := threadCPU() - start; cpu > 0 {
					b.ReportMetric(float64(len(p))*float64(b.N)/cpu.Seconds()/1e9, "GB/s/core")
				}
			})
		}
	}
}
