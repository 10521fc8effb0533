package tony.azkaban;

import azkaban.ServiceProvider;
import azkaban.flow.Edge;
import azkaban.flow.Flow;
import azkaban.jobExecutor.Job;
import azkaban.jobtype.JobTypeManager;
import azkaban.project.DirectoryYamlFlowLoader;
import azkaban.project.FlowLoaderUtils;
import azkaban.project.Project;
import azkaban.utils.Props;
import azkaban.utils.PropsUtils;
import com.google.inject.Guice;
import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
 * <p>Usage: RunFlow PLUGIN_DIR FLOW_DIR WORK_DIR EXEC_ID JOB [JOB ...] for Flow 1.0 .job files, or
 * RunFlow PLUGIN_DIR FLOW_FILE.flow WORK_DIR EXEC_ID for Flow 2.0 (loaded and validated by Azkaban's
 * DirectoryYamlFlowLoader, run in dependency order). With CANCEL_AFTER_S=N in the environment, the last
 * job is cancelled after N seconds (what "Kill" in Azkaban's UI does).
 */
public final class RunFlow {
  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: RunFlow PLUGIN_DIR (FLOW_DIR EXEC_ID... JOB [JOB ...] | FLOW_FILE.flow) WORK_DIR EXEC_ID");
      System.exit(2);
    }
    Logger root = Logger.getRootLogger();
    root.setLevel(Level.INFO);
    root.addAppender(new ConsoleAppender(new PatternLayout("%p %c{1} %m%n")));
    ServiceProvider.SERVICE_PROVIDER.setInjector(Guice.createInjector());

    File flowPath = new File(args[1]);
    File workDir = new File(args[2]);
    String execId = args[3];
    // PLUGIN_DIR is an executor's plugins/jobtypes: its commonprivate.properties holds the settings of
    // the built-in types (e.g. execute.as.user), each plugin directory its own.
    JobTypeManager manager = new JobTypeManager(args[0], new Props(), RunFlow.class.getClassLoader());
    String cancelAfter = System.getenv("CANCEL_AFTER_S");

    Map<String, Props> jobProps = new LinkedHashMap<>();
    String flowId;
    String project;
    if (flowPath.getName().endsWith(".flow")) {
      flowId = flowPath.getName().replaceAll("\\.flow$", "");
      project = flowPath.getParentFile().getName();
      DirectoryYamlFlowLoader loader = new DirectoryYamlFlowLoader(new Props());
      loader.loadProjectFlow(new Project(1, project), flowPath.getParentFile());
      if (!loader.getErrors().isEmpty()) {
        System.out.println("FLOW INVALID " + loader.getErrors());
        System.exit(2);
      }
      Flow flow = loader.getFlowMap().get(flowId);
      Props flowConfig = FlowLoaderUtils.getPropsFromYamlFile(flowId, flowPath);
      for (String jobId : topologicalOrder(flow)) {
        Props node = FlowLoaderUtils.getPropsFromYamlFile(flowId + ":" + jobId, flowPath);
        jobProps.put(jobId, new Props(flowConfig, node));
      }
    } else {
      project = flowPath.getName();
      for (int i = 4; i < args.length; i++) {
        jobProps.put(args[i], new Props(null, new File(flowPath, args[i] + ".job")));
      }
      flowId = args[args.length - 1];  // Flow 1.0: the flow is named after its last job
    }
    List<String> jobs = new ArrayList<>(jobProps.keySet());
    Props inputs = new Props();
    for (int i = 0; i < jobs.size(); i++) {
      String jobId = jobs.get(i);
      Props own = jobProps.get(jobId);
      own.put("azkaban.flow.execid", execId);
      own.put("azkaban.flow.flowid", flowId);
      own.put("azkaban.flow.projectname", project);
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

  /** The flow's nodes, every one after the nodes it depends on. */
  private static List<String> topologicalOrder(Flow flow) {
    List<String> order = new ArrayList<>();
    while (order.size() < flow.getNodes().size()) {
      for (azkaban.flow.Node node : flow.getNodes()) {
        if (order.contains(node.getId())) {
          continue;
        }
        boolean ready = true;
        for (Edge edge : flow.getEdges()) {
          if (edge.getTargetId().equals(node.getId()) && !order.contains(edge.getSourceId())) {
            ready = false;
          }
        }
        if (ready) {
          order.add(node.getId());
        }
      }
    }
    return order;
  }
}
