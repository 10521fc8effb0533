package tony.oozie;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;

/**
 * The main class of tony-airflow's Oozie {@code <java>} action: it runs its arguments as a command
 * (tony-airflow's Oozie entry point, {@code python3 -m tony_airflow.cli.oozie <job options>}) in the
 * launcher's directory, as Oozie's ShellMain would, with two differences that are why it exists:
 * <ul>
 *   <li>when the command fails, the exception it throws carries the command's last line on stderr (the
 *       one-line reason), which Oozie's launcher makes the action's error message (ShellMain's is only
 *       "Main Class [...], exit code [1]");</li>
 *   <li>its key=value lines on stdout are the action's data ({@code <capture-output/>}), written where the
 *       launcher reads a java action's output ({@code oozie.action.output.properties}).</li>
 * </ul>
 * The command gets {@code OOZIE_ACTION_CONF_XML} as ShellMain gives it. An executable named by a relative
 * path (a shipped environment's {@code tonyenv/bin/python}) puts its directory first on PATH. It stays in
 * the launcher's process group, so the SIGTERM YARN sends when Oozie kills the action reaches it too.
 * Compiled for Java 8 with nothing but the JDK: {@code tony oozie jar DIR} builds it.
 */
public final class ActionMain {
    static final String OUTPUT_PROPERTIES = "oozie.action.output.properties";
    static final String ACTION_CONF_XML = "oozie.action.conf.xml";

    private ActionMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("arg: none given; allowed: the command to run, e.g. "
                    + "python3 -m tony_airflow.cli.oozie <ytf-submit options> COMMAND");
        }
        ProcessBuilder builder = new ProcessBuilder(Arrays.asList(args));
        builder.directory(new File(".").getAbsoluteFile());
        builder.redirectInput(new File("/dev/null"));
        Map<String, String> env = builder.environment();
        String actionConf = System.getProperty(ACTION_CONF_XML);
        if (actionConf != null) {
            env.put("OOZIE_ACTION_CONF_XML", actionConf);
        }
        String exe = args[0];
        if (exe.contains("/") && !exe.startsWith("/")) {
            String dir = new File(exe).getAbsoluteFile().getParent();
            String path = env.get("PATH");
            env.put("PATH", path == null || path.isEmpty() ? dir : dir + File.pathSeparator + path);
        }
        System.out.println(">>> tony-airflow's Oozie action runs: " + String.join(" ", args));
        System.out.flush();
        Process process;
        try {
            process = builder.start();
        } catch (IOException e) {
            throw new IllegalStateException("cannot run " + exe + ": " + e.getMessage(), e);
        }
        Pump out = new Pump(process.getInputStream(), System.out, true);
        Pump err = new Pump(process.getErrorStream(), System.err, false);
        out.start();
        err.start();
        int exitCode = process.waitFor();
        out.join();
        err.join();
        System.out.println("<<< exit code " + exitCode);
        String outputFile = System.getProperty(OUTPUT_PROPERTIES);
        if (outputFile != null) {
            try (Writer w = new OutputStreamWriter(new FileOutputStream(outputFile), StandardCharsets.UTF_8)) {
                w.write(out.text.toString());
            }
        }
        if (exitCode != 0) {
            String reason = err.lastLine;
            throw new RuntimeException(reason != null ? reason : exe + " exited with code " + exitCode
                    + " and wrote nothing on stderr");
        }
    }

    /** Copies one stream of the command line by line, keeping its text (stdout) or its last line (stderr). */
    static final class Pump extends Thread {
        private final InputStream in;
        private final PrintStream to;
        private final boolean keepText;
        final StringBuilder text = new StringBuilder();
        volatile String lastLine;

        Pump(InputStream in, PrintStream to, boolean keepText) {
            this.in = in;
            this.to = to;
            this.keepText = keepText;
            setDaemon(true);
        }

        @Override
        public void run() {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    to.println(line);
                    to.flush();
                    if (keepText) {
                        text.append(line).append('\n');
                    }
                    if (!line.trim().isEmpty()) {
                        lastLine = line.trim();
                    }
                }
            } catch (IOException e) {
                to.println("tony-airflow's Oozie action: reading the command's output failed: " + e);
            }
        }
    }
}
