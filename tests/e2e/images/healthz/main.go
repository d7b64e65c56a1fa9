// healthz: the app of the real-kubelet tier's image (test fixture only, never shipped).
//
// Installed in the image under the names control-plane manifests run (kube-scheduler,
// kube-apiserver, etcd, ...), it stands in for the component: it serves /healthz, /livez,
// /readyz, /health and / with 200 "ok" on the component's probe port, so kubeadm's manifests run
// with their probes unchanged. One port answers both plain HTTP and HTTPS (a self-signed
// certificate made at start; the kubelet's HTTPS probes do not verify it), because kubeadm's
// probes use scheme HTTPS and busybox httpd speaks only HTTP. Paths under /fail answer 500.
//
// Ports: every --secure-port=N / --port=N / --healthz-port=N argument, else $HEALTHZ_PORTS
// (comma-separated), else the default of the name it was started as. SIGTERM exits at once.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

var defaults = map[string]string{
	"kube-scheduler":          "10259",
	"kube-controller-manager": "10257",
	"kube-apiserver":          "6443",
	"etcd":                    "2381",
	"kube-proxy":              "10256",
	"haproxy":                 "8443",
}

type peeked struct {
	net.Conn
	r *bufio.Reader
}

func (p peeked) Read(b []byte) (int, error) { return p.r.Read(b) }

type muxListener struct {
	net.Listener
	tlsConf *tls.Config
}

func (m muxListener) Accept() (net.Conn, error) {
	for {
		c, err := m.Listener.Accept()
		if err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		first, err := r.Peek(1)
		_ = c.SetReadDeadline(time.Time{})
		if err != nil {
			c.Close()
			continue
		}
		pc := peeked{c, r}
		if first[0] == 0x16 { // TLS handshake record
			return tls.Server(pc, m.tlsConf), nil
		}
		return pc, nil
	}
}

func selfSigned() tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func ports() []string {
	var out []string
	for _, a := range os.Args[1:] {
		for _, f := range []string{"--secure-port=", "--port=", "--healthz-port="} {
			if strings.HasPrefix(a, f) && strings.TrimPrefix(a, f) != "0" {
				out = append(out, strings.TrimPrefix(a, f))
			}
		}
	}
	if len(out) == 0 && os.Getenv("HEALTHZ_PORTS") != "" {
		out = strings.Split(os.Getenv("HEALTHZ_PORTS"), ",")
	}
	if len(out) == 0 {
		if p, ok := defaults[filepath.Base(os.Args[0])]; ok {
			out = []string{p}
		}
	}
	return out
}

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	conf := &tls.Config{Certificates: []tls.Certificate{selfSigned()}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/fail") {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ps := ports()
	fmt.Printf("%s: serving /healthz on %v (http and https)\n", filepath.Base(os.Args[0]), ps)
	for _, p := range ps {
		l, err := net.Listen("tcp", ":"+strings.TrimSpace(p))
		if err != nil {
			fmt.Fprintf(os.Stderr, "listen %s: %v\n", p, err)
			continue
		}
		go func() { _ = http.Serve(muxListener{l, conf}, h) }()
	}
	<-sig
	os.Exit(0)
}
