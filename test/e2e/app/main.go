// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Command app is the one program in the end-to-end run's image
// (local/sluice-e2e-app): containerd's sandbox ("pause") container when run
// without flags, and production's small HTTP server with -listen:
//
//	app                 # waits for SIGTERM or SIGINT, then exits 0
//	app -listen :8080   # GET / answers "pod <POD_NAME> node <NODE_NAME>"
//
// The server answers /healthz for its readiness probe and, on SIGTERM,
// stops taking connections only after -drain, as a serving process behind a
// Service does while its endpoint is being removed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "address to serve HTTP on; empty: wait for a signal (the pause container)")
	drain := flag.Duration("drain", 3*time.Second, "how long to keep serving after SIGTERM")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *listen == "" {
		<-ctx.Done()
		return
	}
	if err := serve(ctx, *listen, *drain); err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, addr string, drain time.Duration) error {
	answer := fmt.Sprintf("pod %s node %s\n", os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, answer) })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("app: serving on %s: %s", addr, answer)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Endpoints are removed while the pod terminates; serve the requests
	// still routed here meanwhile.
	time.Sleep(drain)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
