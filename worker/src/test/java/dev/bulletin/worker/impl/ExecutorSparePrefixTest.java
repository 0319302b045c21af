package dev.bulletin.worker.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * The names of the spares an executor keeps in its user's staging folder, which the agent
 * deletes when the executor ends: the same as the executor writes them
 * (python-client/tests/test_result_memory.py checks its side with the same ids).
 */
class ExecutorSparePrefixTest {

  @Test
  void keepsPlainIdsAndReplacesEverythingElse() {
    assertEquals(".exec-local-e2-spare-", ExecutorProcess.sparePrefix("local-e2"));
    assertEquals(".exec-node_7.lab-e31-spare-", ExecutorProcess.sparePrefix("node_7.lab-e31"));
    // A worker id is the operator's: a '/' must not make a path, nor a non-ASCII letter a
    // name the executor spells another way.
    assertEquals(".exec-h_ad_x_1-e3-spare-", ExecutorProcess.sparePrefix("héad/x:1-e3"));
  }
}
