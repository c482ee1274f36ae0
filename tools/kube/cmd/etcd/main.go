// Command etcd is etcd's own main (go.etcd.io/etcd/v3's main.go), built here
// from the server module so the test tooling needs no separate checkout.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
