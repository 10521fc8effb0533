package tony.oozie;

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import javax.xml.parsers.DocumentBuilderFactory;
import org.apache.hadoop.conf.Configuration;
import org.apache.oozie.action.hadoop.ActionUtils;
import org.apache.oozie.action.hadoop.ShellMain;
import org.apache.oozie.util.PropertiesUtils;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * Runs one shell action of a workflow.xml the way Oozie 5.2.1 does, minus the Oozie server and the
 * launcher's YARN container: the action element becomes the action configuration ShellActionExecutor
 * writes (oozie.shell.exec, oozie.shell.args, oozie.shell.envs, oozie.shell.capture-output, encoded
 * with the sharelib's own ActionUtils), Oozie's ShellMain runs it (it starts the process, passes
 * OOZIE_ACTION_CONF_XML, captures stdout, enforces the 2 KB limit and writes the output properties),
 * and the server's PropertiesUtils.stringToProperties parses what was captured, which is what
 * ${wf:actionData('name')} returns.
 *
 * <p>Usage: RunShellAction WORKFLOW_XML ACTION_NAME WORK_DIR WORKFLOW_ID. Prints "ACTION name OK" or
 * "ACTION name ERROR message", then "ACTIONDATA key=value" lines. EL (${...}) is not evaluated here, so
 * actions whose exec, arguments or env-vars use it are refused.
 */
public final class RunShellAction {
  public static void main(String[] args) throws Exception {
    File workflow = new File(args[0]);
    String actionName = args[1];
    File workDir = new File(args[2]);
    String workflowId = args[3];

    Element shell = shellOf(workflow, actionName);
    Configuration conf = new Configuration(false);
    conf.set("oozie.job.id", workflowId);
    conf.set("oozie.action.id", workflowId + "@" + actionName);
    conf.set("oozie.launcher.action.main.class", ShellMain.class.getName());
    conf.set(ShellMain.CONF_OOZIE_SHELL_EXEC, text(shell, "exec").get(0));
    ActionUtils.setStrings(conf, ShellMain.CONF_OOZIE_SHELL_ARGS, text(shell, "argument").toArray(new String[0]));
    ActionUtils.setStrings(conf, ShellMain.CONF_OOZIE_SHELL_ENVS, text(shell, "env-var").toArray(new String[0]));
    conf.setBoolean(ShellMain.CONF_OOZIE_SHELL_CAPTURE_OUTPUT,
        shell.getElementsByTagNameNS("*", "capture-output").getLength() > 0);

    workDir.mkdirs();
    File actionXml = new File(workDir, "action.xml");
    try (OutputStream out = new FileOutputStream(actionXml)) {
      conf.writeXml(out);
    }
    File outputProps = new File(workDir, "output.properties");
    System.setProperty("oozie.action.conf.xml", actionXml.getAbsolutePath());
    System.setProperty("oozie.action.output.properties", outputProps.getAbsolutePath());
    System.setProperty("oozie.action.id", workflowId + "@" + actionName);
    System.setProperty("oozie.job.id", workflowId);
    System.setProperty("oozie.launcher.job.id", "launcher_" + workflowId);

    String status = "OK";
    try {
      ShellMain.main(new String[0]);
    } catch (Exception e) {
      status = "ERROR " + e;
    }
    System.out.println("ACTION " + actionName + " " + status);
    if (outputProps.exists()) {
      String captured = new String(Files.readAllBytes(outputProps.toPath()), StandardCharsets.UTF_8);
      Properties data = PropertiesUtils.stringToProperties(captured);
      Map<String, String> sorted = new TreeMap<>();
      for (String key : data.stringPropertyNames()) {
        sorted.put(key, data.getProperty(key));
      }
      for (Map.Entry<String, String> entry : sorted.entrySet()) {
        System.out.println("ACTIONDATA " + entry.getKey() + "=" + entry.getValue());
      }
    }
    System.exit(status.equals("OK") ? 0 : 1);
  }

  private static Element shellOf(File workflow, String actionName) throws Exception {
    DocumentBuilderFactory factory = DocumentBuilderFactory.newInstance();
    factory.setNamespaceAware(true);
    Document doc = factory.newDocumentBuilder().parse(workflow);
    NodeList actions = doc.getElementsByTagNameNS("*", "action");
    for (int i = 0; i < actions.getLength(); i++) {
      Element action = (Element) actions.item(i);
      if (actionName.equals(action.getAttribute("name"))) {
        NodeList shells = action.getElementsByTagNameNS("*", "shell");
        if (shells.getLength() == 1) {
          return (Element) shells.item(0);
        }
      }
    }
    throw new IllegalArgumentException("no shell action named " + actionName + " in " + workflow);
  }

  private static List<String> text(Element shell, String name) {
    List<String> values = new ArrayList<>();
    for (Node child = shell.getFirstChild(); child != null; child = child.getNextSibling()) {
      if (child instanceof Element && name.equals(child.getLocalName())) {
        String value = child.getTextContent().trim();
        if (value.contains("${")) {
          throw new IllegalArgumentException("<" + name + "> uses EL, which this harness does not evaluate: " + value);
        }
        values.add(value);
      }
    }
    return values;
  }
}
