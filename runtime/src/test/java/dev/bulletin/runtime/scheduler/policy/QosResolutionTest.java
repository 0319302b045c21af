package dev.bulletin.runtime.scheduler.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The one place a call's QoS class is resolved: submit, the pass and the queue order use it. */
class QosResolutionTest {

  private final PolicyConfig policy = PolicyConfig.defaults();

  @Test
  void noClassMeansTheDefaultOne() {
    assertEquals("interactive", policy.qosFor("").orElseThrow().name());
    assertEquals("interactive", policy.qosFor(" ").orElseThrow().name());
    assertEquals("interactive", policy.qosFor(null).orElseThrow().name());
  }

  @Test
  void aNamedClassIsThatClassAndAnUnknownOneIsNone() {
    assertEquals(QosClass.batch(), policy.qosFor("batch").orElseThrow());
    assertTrue(policy.qosFor("turbo").isEmpty());
  }
}
