package dev.bulletin.runtime.journal.impl;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.util.Pool;
import dev.bulletin.runtime.journal.JournalRecord;

/**
 * The one Kryo registry of the journal. Registration is required (an unregistered class in a
 * file is refused, not instantiated) and every id is explicit and fixed: the ids are part of the
 * journal's format. Never reuse or renumber an id; add new ones at the end.
 */
final class KryoRegistry {
  private KryoRegistry() { }

  /** Kryo instances are not thread-safe: the writer thread and a restore each borrow one. */
  static final Pool<Kryo> POOL = new Pool<>(true, false, 4) {
    @Override
    protected Kryo create() {
      return newKryo();
    }
  };

  static Kryo newKryo() {
    Kryo kryo = new Kryo();
    kryo.setRegistrationRequired(true);
    kryo.setReferences(false);
    kryo.register(byte[].class, 100);
    kryo.register(String[].class, 101);
    kryo.register(JournalRecord.SessionOpened.class, 110);
    kryo.register(JournalRecord.SessionClosed.class, 111);
    kryo.register(JournalRecord.SessionHold.class, 112);
    kryo.register(JournalRecord.SessionSeq.class, 113);
    kryo.register(JournalRecord.CallAccepted.class, 120);
    kryo.register(JournalRecord.CallStarted.class, 121);
    kryo.register(JournalRecord.CallRequeued.class, 122);
    kryo.register(JournalRecord.CallEnded.class, 123);
    kryo.register(JournalRecord.CallGpuShare.class, 124);
    kryo.register(JournalRecord.GroupUsage.class, 130);
    kryo.register(JournalRecord.GroupUsage[].class, 131);
    kryo.register(JournalRecord.UserUsage.class, 132);
    kryo.register(JournalRecord.UserUsage[].class, 133);
    kryo.register(JournalRecord.Ledger.class, 134);
    kryo.register(JournalRecord.PoolWorker.class, 140);
    kryo.register(JournalRecord.SnapshotEnd.class, 150);
    kryo.register(JournalRecord.ResultKept.class, 160);
    kryo.register(JournalRecord.ResidentSpill.class, 170);
    kryo.register(JournalRecord.ResidentSpillReleased.class, 171);
    return kryo;
  }
}
