import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * One Curator LeaderLatch participant, driven over stdin by regent's
 * Curator interop test (crates/regent-zookeeper/tests/curator.rs) and by
 * the benchmark harness (`regent-bench`), which compile it at run time through regent-testkit's
 * LatchParticipant.
 *
 * <p>Arguments: CONNECT_STRING LATCH_PATH PARTICIPANT_ID. Prints READY once
 * connected, then answers one line per command:
 *
 * <pre>
 *   start          latch.start()                       STARTED
 *   leader?        latch.getLeader()                   LEADER id | LEADER -
 *   has?           latch.hasLeadership()               HAS true|false
 *   participants?  latch.getParticipants(), in line    PARTICIPANTS id id ...
 *   close          latch.close(NOTIFY_LEADER)          CLOSED
 *   exit           closes the client and exits
 * </pre>
 *
 * <p>The latch's listener prints EVENT isLeader and EVENT notLeader as they
 * come; a failed command prints ERROR and the exception. Ids are printed
 * with backslashes and newlines escaped, so that one id is one line.
 * Every line is flushed.
 *
 * <p>SIGTERM or SIGINT stops it as a service would stop: a shutdown hook
 * closes the latch (NOTIFY_LEADER) and the client, whose closed session
 * deletes the latch's node at once, so the next participant in line leads
 * without waiting for a session timeout. SIGKILL leaves the session to
 * expire.
 */
public final class LatchParticipant {
    private LatchParticipant() {}

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String oneLine(String id) {
        return id.replace("\\", "\\\\").replace("\n", "\\n");
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: LatchParticipant CONNECT_STRING LATCH_PATH PARTICIPANT_ID");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .sessionTimeoutMs(2000)
            .connectionTimeoutMs(2000)
            .retryPolicy(new ExponentialBackoffRetry(100, 5))
            .build();
        client.start();
        if (!client.blockUntilConnected(10, TimeUnit.SECONDS)) {
            say("ERROR not connected to " + args[0]);
            System.exit(1);
        }
        LeaderLatch latch = new LeaderLatch(client, args[1], args[2]);
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                say("EVENT isLeader");
            }

            @Override
            public void notLeader() {
                say("EVENT notLeader");
            }
        });
        // Set once the client is closed on purpose (exit, end of stdin):
        // the shutdown hook has nothing left to do then.
        final AtomicBoolean closed = new AtomicBoolean(false);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (closed.getAndSet(true)) {
                return;
            }
            try {
                if (latch.getState() == LeaderLatch.State.STARTED) {
                    latch.close(LeaderLatch.CloseMode.NOTIFY_LEADER);
                }
            } catch (Exception e) {
                // Closing the client below ends the session all the same.
            }
            client.close();
        }));
        say("READY");

        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = in.readLine()) != null && !command.equals("exit")) {
            try {
                switch (command) {
                    case "start":
                        latch.start();
                        say("STARTED");
                        break;
                    case "leader?":
                        // No participant: Curator answers with an id "" that is not the leader.
                        Participant leader = latch.getLeader();
                        say("LEADER " + (leader.isLeader() ? oneLine(leader.getId()) : "-"));
                        break;
                    case "has?":
                        say("HAS " + latch.hasLeadership());
                        break;
                    case "participants?":
                        StringBuilder line = new StringBuilder("PARTICIPANTS");
                        for (Participant p : latch.getParticipants()) {
                            line.append(' ').append(oneLine(p.getId()));
                        }
                        say(line.toString());
                        break;
                    case "close":
                        latch.close(LeaderLatch.CloseMode.NOTIFY_LEADER);
                        say("CLOSED");
                        break;
                    default:
                        say("ERROR unknown command " + command);
                }
            } catch (Exception e) {
                say("ERROR " + oneLine(e.toString()));
            }
        }
        // Closing the session deletes the latch's node if it still stands.
        if (!closed.getAndSet(true)) {
            client.close();
        }
        System.exit(0);
    }
}
