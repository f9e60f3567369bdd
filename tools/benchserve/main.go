// Command benchserve serves one directory over HTTP on a loopback address
// for scripts/bench-image.sh: a Go file server (Range, ETag-free
// Last-Modified) so the image server is never the bottleneck being measured.
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9390", "listen address")
	dir := flag.String("dir", ".", "directory to serve")
	flag.Parse()
	log.Fatal(http.ListenAndServe(*addr, http.FileServer(http.Dir(*dir))))
}
