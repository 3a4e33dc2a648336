// fakecri serves the CRI (runtime and image services) that kubelet needs, from
// k8s.io/cri-client/pkg/fake: sandboxes and containers exist only in memory and "run" the moment
// kubelet starts them. Enough for a real kubelet to register its Node, turn Ready and report its
// pods Ready, with no container runtime on the machine. Built by nodegate.localcluster.build.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	fakeremote "k8s.io/cri-client/pkg/fake"
)

const fakeImageSizeBytes = 1 << 20

func main() {
	endpoint := flag.String("endpoint", "", "where to serve, e.g. unix:///tmp/x/cri.sock")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "fakecri: --endpoint is required")
		os.Exit(2)
	}
	runtime := fakeremote.NewFakeRemoteRuntime()
	// A pulled image needs a size: kubelet refuses to start a container whose image status
	// has none ("Id or size of image ... is not set"), and the fake's default is 0.
	runtime.ImageService.SetFakeImageSize(fakeImageSizeBytes)
	if err := runtime.Start(*endpoint); err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("fakecri: serving on %s\n", *endpoint)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	runtime.Stop()
}
