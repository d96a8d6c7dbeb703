//go:build ignore

// setversion copies a Pulumi package schema and sets its "version", as
// upstream providers' generate steps do before embedding the schema in the
// provider binary (GetSchema then reports the plugin's own version). Standard
// library only; test/engine/build.sh runs it as
//
//	go run setversion.go IN.json OUT.json VERSION
package main

import (
	"encoding/json"
	"log"
	"os"
)

func main() {
	if len(os.Args) != 4 {
		log.Fatal("usage: go run setversion.go IN.json OUT.json VERSION")
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	var spec map[string]json.RawMessage
	if err := json.Unmarshal(b, &spec); err != nil {
		log.Fatalf("%s: %v", os.Args[1], err)
	}
	if _, ok := spec["name"]; !ok {
		log.Fatalf("%s: not a Pulumi package schema (no \"name\")", os.Args[1])
	}
	spec["version"], _ = json.Marshal(os.Args[3])
	out, err := json.Marshal(spec)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(os.Args[2], out, 0o644); err != nil {
		log.Fatal(err)
	}
}
