// Stand-in for the images of a stack in the real-dockerd tests (test/stack/docker-lifecycle.test.ts):
// one static binary, imported into dockerd as the only file of an image (no registry here).
//
//	standin serve ADDR           answers every request with "$STANDIN_ROLE $HOSTNAME"
//	standin proxy ADDR UPSTREAM  forwards every request to http://UPSTREAM (the env router's part)
//	standin get URL [MS]         GET URL, print the body; exit 1 on any error (timeout MS, default 3000)
//	standin resolve NAME         print NAME's addresses (through the container's resolver)
//	standin env                  print the environment
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: standin serve ADDR | proxy ADDR UPSTREAM | get URL [MS] | resolve NAME | env")
	}
	switch os.Args[1] {
	case "serve":
		host, _ := os.Hostname()
		role := os.Getenv("STANDIN_ROLE")
		fail(http.ListenAndServe(arg(2), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "%s %s\n", role, host)
		})))
	case "proxy":
		upstream, err := url.Parse("http://" + arg(3))
		if err != nil {
			fail(err)
		}
		fail(http.ListenAndServe(arg(2), httputil.NewSingleHostReverseProxy(upstream)))
	case "get":
		ms := 3000
		if len(os.Args) > 3 {
			ms, _ = strconv.Atoi(os.Args[3])
		}
		c := http.Client{Timeout: time.Duration(ms) * time.Millisecond}
		r, err := c.Get(arg(2))
		if err != nil {
			fail(err)
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Println(strings.TrimSpace(string(b)))
	case "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, arg(2))
		if err != nil {
			fail(err)
		}
		fmt.Println(strings.Join(addrs, " "))
	case "env":
		for _, e := range os.Environ() {
			fmt.Println(e)
		}
	default:
		fail("unknown command " + os.Args[1])
	}
}

func arg(i int) string {
	if len(os.Args) <= i {
		fail(fmt.Sprintf("%s needs %d argument(s)", os.Args[1], i-1))
	}
	return os.Args[i]
}

func fail(v any) {
	fmt.Fprintln(os.Stderr, "error:", v)
	os.Exit(1)
}
