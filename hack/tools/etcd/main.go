// Command etcd is etcd's own main, wrapped so that it builds from the Go module proxy: the
// go.etcd.io/etcd/server/v3 module cannot be `go install`ed (its go.mod has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
