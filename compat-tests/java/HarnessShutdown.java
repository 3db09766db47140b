// SIGTERM for the harnesses' long-running subcommands (KbrokerHarness group-member, ShareHarness
// share-consumer): the JVM's shutdown hook asks the work loop to stop, waits for it to close its
// client, and ends the JVM with 0 if it closed, 1 if not. JDK only: compiled with KbrokerHarness.java
// (against kafka-clients 3.9.0 and 4.3.0) and ShareHarness.java (4.3.0), which find it through javac's
// -sourcepath (compat-tests/conftest.py: _compiled_harness).

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

final class HarnessShutdown {
    private HarnessShutdown() {
    }

    /**
     * On SIGTERM, unless {@code failing} (main is exiting with its own status): run {@code stop}
     * (e.g. a flag and {@code consumer.wakeup()}), wait up to 60 s for {@code worker} (the thread
     * that closes the client), then halt with 0 if {@code closed} is set, 1 if not.
     */
    static void onSigterm(String name, BooleanSupplier failing, Runnable stop, Thread worker, AtomicBoolean closed) {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (failing.getAsBoolean()) return;
            stop.run();
            try {
                worker.join(60_000);
            } catch (InterruptedException ignored) {
                // fall through: the status below says whether the client closed
            }
            System.out.flush();
            Runtime.getRuntime().halt(closed.get() ? 0 : 1);
        }, name));
    }
}
