/* The sandbox ("pause") image of the real-kubelet tier: holds the pod's namespaces, reaps
 * children, exits on SIGINT/SIGTERM. With -v it prints a version and exits 0, as upstream's does:
 * kubeadm upgrade's health-check Job runs the pause image that way and waits for it. Built with `gcc -static` by tests/e2e/kubelet_lab.py;
 * test fixture only (upstream's is kubernetes/build/pause/linux/pause.c). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }
static void on_chld(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        printf("pause.c staticpodd-e2e\n");
        return 0;
    }
    struct sigaction term = {0}, chld = {0};
    term.sa_handler = on_term;
    sigaction(SIGINT, &term, NULL);
    sigaction(SIGTERM, &term, NULL);
    chld.sa_handler = on_chld;
    chld.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &chld, NULL);
    for (;;) pause();
    return 0;
}
