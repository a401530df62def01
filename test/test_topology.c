/* test/test_topology.c: hvd__topo_build (hvd/topology.c) on placements
 * simulated in one process, as a launcher would make them: node by node,
 * round-robin (mpirun --map-by node), uneven, one node, one rank. For
 * each: nodes are numbered by their lowest rank, local ranks count up
 * within a node, the ring visits every rank once with each node's ranks
 * adjacent and in rank order (so it crosses the network once per node
 * boundary, nnodes hops in all), and a node-by-node placement keeps the
 * rank order. Maps that no MPI could produce are refused.
 */
#include <stdio.h>
#include "hvd/topology.h"
#include "test/test.h"

enum { MAX_RANKS = 16 };

/* first[r], the lowest rank on r's node, from each rank's host letter. */
static void firsts_of(const char *hosts, int *first)
{
    for (int r = 0; hosts[r]; r++) {
        first[r] = r;
        for (int q = 0; q < r; q++)
            if (hosts[q] == hosts[r]) {
                first[r] = q;
                break;
            }
    }
}

/* hosts: one letter per rank ("abab": --map-by node on 2 hosts);
 * ring: the ring order expected, as rank digits ("0213"). */
static void check(const char *hosts, int nnodes, const char *ring)
{
    int size = 0, first[MAX_RANKS], failures = test_failures;
    while (hosts[size])
        size++;
    firsts_of(hosts, first);
    hvd__topo_t t;
    int status = hvd__topo_build(&t, first, size);
    TEST_EQ(status, HVD_OK);
    if (status != HVD_OK) return;
    TEST_EQ(t.size, size);
    TEST_EQ(t.nnodes, nnodes);

    /* order: the rank at each place of the ring, each place taken once. */
    int order[MAX_RANKS], hops = 0, local[MAX_RANKS] = {0}, nodes = 0;
    for (int i = 0; i < size; i++)
        order[i] = -1;
    for (int r = 0; r < size; r++) {
        int node = t.node_idx[r], at = t.ring_rank[r];
        TEST_EQ(node, first[r] == r ? nodes++ : t.node_idx[first[r]]);
        if (node < 0 || node >= nnodes || at < 0 || at >= size ||
            order[at] != -1) {
            TEST_FAIL("rank %d: node %d, ring rank %d: out of range or taken",
                      r, node, at);
            goto out;
        }
        TEST_EQ(t.local_rank[r], local[node]++);
        order[at] = r;
    }
    for (int n = 0; n < nnodes; n++)
        TEST_EQ(t.node_size[n], local[n]);
    for (int i = 0; i < size; i++) {
        int r = order[i], next = order[(i + 1) % size];
        TEST_EQ(r, ring[i] - '0');
        if (hosts[r] != hosts[next]) hops++;
        /* Within a node, rank order; a node's ranks start at node_start. */
        if (i + 1 < size && hosts[r] == hosts[next]) TEST_TRUE(r < next);
        if (t.local_rank[r] == 0) TEST_EQ(t.node_start[t.node_idx[r]], i);
    }
    TEST_EQ(hops, nnodes > 1 ? nnodes : 0);
out:
    if (test_failures > failures)
        fprintf(stderr, "  in the case hosts=%s ring=%s\n", hosts, ring);
    hvd__topo_free(&t);
    TEST_TRUE(t.node_idx == NULL);
}

int main(void)
{
    check("a", 1, "0");
    check("aaaa", 1, "0123");
    check("aabb", 2, "0123"); /* node by node: the rank order */
    check("abab", 2, "0213"); /* --map-by node */
    check("aba", 2, "021");   /* 2 + 1, round-robin */
    check("aab", 2, "012");   /* 2 + 1, node by node */
    check("abcabcab", 3, "03614725");
    check("abba", 2, "0312");
    check("abcdefg", 7, "0123456");
    check("aaabbbbccd", 4, "0123456789");

    /* No launcher makes these: a rank before its node's lowest, a lowest
     * rank that is not its own node's, no ranks. */
    hvd__topo_t t;
    TEST_EQ(hvd__topo_build(&t, (int[]){0, 2, 2}, 3), HVD_ERR_ARG);
    TEST_EQ(hvd__topo_build(&t, (int[]){0, 0, 1}, 3), HVD_ERR_ARG);
    TEST_EQ(hvd__topo_build(&t, (int[]){-1}, 1), HVD_ERR_ARG);
    TEST_EQ(hvd__topo_build(&t, (int[]){0}, 0), HVD_ERR_ARG);
    TEST_TRUE(t.node_idx == NULL);
    if (!test_failures) printf("test_topology: ok\n");
    return test_exit_code();
}
