package spool

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
)

func TestZZExplore(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXPLORE_N"))
	kinds := map[string][]uint64{}
	msgs := map[string]string{}
	for i := range n {
		seed := uint64(i + 1 + atoiEnv("EXPLORE_FROM"))
		sc := genModelScript(seedChoices(seed), 40)
		_, err := runModel(sc)
		var f *modelFailure
		if errors.As(err, &f) {
			k := f.kind
			if len(f.msg) > 0 {
				k = f.kind + ": " + f.msg[:min(len(f.msg), 60)]
			}
			k2 := f.kind + "/" + sc.cfg.full.String()
			kinds[k2] = append(kinds[k2], seed)
			msgs[k2] = k
			if _, ok := msgs[f.kind]; !ok {
				msgs[f.kind] = k
			}
		}
	}
	for k, s := range kinds {
		fmt.Printf("%-10s %4d first seeds %v | %s\n", k, len(s), s[:min(len(s), 6)], msgs[k])
	}
}

func TestZZPrint(t *testing.T) {
	s, _ := strconv.Atoi(os.Getenv("SEED"))
	fmt.Print(genModelScript(seedChoices(uint64(s)), 40))
}

func atoiEnv(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
