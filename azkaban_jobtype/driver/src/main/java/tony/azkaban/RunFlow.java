package tony.azkaban;

import azkaban.ServiceProvider;
import azkaban.jobExecutor.Job;
import azkaban.jobtype.JobTypeManager;
import azkaban.utils.Props;
import azkaban.utils.PropsUtils;
import com.google.inject.Guice;
import java.io.File;
import java.util.ArrayList;
import java.util.List;
import org.apache.log4j.ConsoleAppender;
import org.apache.log4j.Level;
import org.apache.log4j.Logger;
import org.apache.log4j.PatternLayout;

/**
 * Runs the jobs of a Flow 1.0 directory in order with Azkaban's own classes, the way an executor does
 * for one linear flow: JobTypeManager loads the plugin directory and builds each job (for type=tensorflow,
 * the ProcessJob our plugin names); the job's output properties become the next job's inputs
 * (FlowRunner's rule), and PropsUtils resolves ${...} against them.
 *
 * <p>Usage: RunFlow PLUGIN_DIR FLOW_DIR WORK_DIR EXEC_ID JOB [JOB ...]. With CANCEL_AFTER_S=N in the
 * environment, the last job is cancelled after N seconds (what "Kill" in Azkaban's UI does).
 */
public final class RunFlow {
  public static void main(String[] args) throws Exception {
    if (args.length < 5) {
      System.err.println("usage: RunFlow PLUGIN_DIR FLOW_DIR WORK_DIR EXEC_ID JOB [JOB ...]");
      System.exit(2);
    }
    Logger root = Logger.getRootLogger();
    root.setLevel(Level.INFO);
    root.addAppender(new ConsoleAppender(new PatternLayout("%p %c{1} %m%n")));
    ServiceProvider.SERVICE_PROVIDER.setInjector(Guice.createInjector());

    File flowDir = new File(args[1]);
    File workDir = new File(args[2]);
    String execId = args[3];
    // PLUGIN_DIR is an executor's plugins/jobtypes: its commonprivate.properties holds the settings of
    // the built-in types (e.g. execute.as.user), each plugin directory its own.
    JobTypeManager manager = new JobTypeManager(args[0], new Props(), RunFlow.class.getClassLoader());
    String cancelAfter = System.getenv("CANCEL_AFTER_S");

    Props inputs = new Props();
    List<String> jobs = new ArrayList<>();
    for (int i = 4; i < args.length; i++) {
      jobs.add(args[i]);
    }
    for (int i = 0; i < jobs.size(); i++) {
      String jobId = jobs.get(i);
      Props own = new Props(null, new File(flowDir, jobId + ".job"));
      own.put("azkaban.flow.execid", execId);
      own.put("azkaban.flow.flowid", jobs.get(jobs.size() - 1));  // Flow 1.0: the flow is named after its last job
      own.put("azkaban.flow.projectname", flowDir.getName());
      own.put("azkaban.job.id", jobId);
      own.put("working.dir", workDir.getAbsolutePath());
      own.put("azkaban.flow.submituser", System.getProperty("user.name"));  // FlowRunner: who ran the flow
      Props props = PropsUtils.resolveProps(new Props(inputs, own));
      Logger logger = Logger.getLogger(jobId);
      Job job = manager.buildJobExecutor(jobId, props, logger);
      System.out.println("JOB " + jobId + " " + job.getClass().getName());
      if (cancelAfter != null && i == jobs.size() - 1) {
        long millis = (long) (Double.parseDouble(cancelAfter) * 1000);
        Thread killer = new Thread(() -> {
          try {
            Thread.sleep(millis);
            System.out.println("CANCEL " + jobId);
            job.cancel();
          } catch (Exception e) {
            e.printStackTrace();
          }
        });
        killer.setDaemon(true);
        killer.start();
      }
      try {
        job.run();
      } catch (Exception e) {
        System.out.println("JOB " + jobId + " FAILED " + e.getMessage());
        System.exit(1);
      }
      inputs = job.getJobGeneratedProperties();
      System.out.println("JOB " + jobId + " SUCCEEDED outputs=" + (inputs == null ? "{}" : inputs.toString()));
      if (inputs == null) {
        inputs = new Props();
      }
    }
  }
}
